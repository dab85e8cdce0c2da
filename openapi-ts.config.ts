import { defineConfig, keywords } from '@hey-api/openapi-ts';

const INT64_PATTERN = '^(0|[1-9][0-9]{0,18})$';
const GLOBALS = new Set([...keywords.javaScriptGlobals, ...keywords.browserGlobals, ...keywords.nodeGlobals]);

export default defineConfig({
  input: './generated/openapi.json',
  output: { path: 'generated/client', postProcess: [] },
  plugins: [
    {
      name: '@hey-api/typescript',
      definitions: { name: (name: string) => (GLOBALS.has(name) ? `${name}Body` : name) },
      '~resolvers': {
        string: (ctx) => (ctx.schema.pattern === INT64_PATTERN ? ctx.$.type.template().add(ctx.$.type('bigint')) : undefined),
      },
    },
    '@hey-api/sdk',
    { name: '@hey-api/client-fetch', includeInEntry: true, throwOnError: true },
  ],
});
