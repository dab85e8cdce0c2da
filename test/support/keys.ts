/** The test run's root Management Key and encryption key: plain constants, importable without the app. */
export const TEST_ROOT_KEY = 'nx-mgmt-test-root-0123456789abcdefghijklmnop';
export const TEST_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64');
