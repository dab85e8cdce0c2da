import { AppError } from '../../errors.js';

/** The ISO 4217 codes the runtime knows (ICU's list), read once. */
const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

/** The workspace currency of a workspace that never set one. */
export const DEFAULT_CURRENCY = 'USD';

/** Refuses a code that is not an ISO 4217 currency, naming the field. */
export function assertCurrency(code: string, param: string): void {
  if (!CURRENCIES.has(code))
    throw new AppError('invalid_parameter', `${param} must be an ISO 4217 currency code; '${code}' is not one`, { param });
}
