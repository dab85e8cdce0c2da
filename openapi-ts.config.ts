import { defineConfig } from '@hey-api/openapi-ts';

export default defineConfig({
  input: './generated/openapi.json',
  output: { path: 'generated/client', postProcess: [] },
  plugins: ['@hey-api/typescript', '@hey-api/sdk', { name: '@hey-api/client-fetch', includeInEntry: true }],
});
