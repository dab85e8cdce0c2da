/**
 * The passthrough classes a workspace or a plan lets through (src/protocols/passthrough.ts): the gateway forwards
 * an unmetered path of a class either lists, uncharged to quota (rate limits, the budget and a per-call price
 * still apply).
 */
import { AppError } from '../../errors.js';
import { isPassthroughClass, PASSTHROUGH_CLASS_NAMES, type PassthroughClass } from '../../protocols/passthrough.js';

/** The classes as stored: each a known class, listed once, in the contract's order; anything else 400 naming `param`. */
export function passthroughClassesOf(classes: readonly string[], param = 'passthroughClasses'): PassthroughClass[] {
  const seen = new Set<string>();
  for (const [i, name] of classes.entries()) {
    if (!isPassthroughClass(name)) {
      throw new AppError('invalid_parameter', `${param}.${i} must be one of ${PASSTHROUGH_CLASS_NAMES.join(', ')}; '${name}' is not`, {
        param: `${param}.${i}`,
      });
    }
    if (seen.has(name)) throw new AppError('invalid_parameter', `${param} lists '${name}' twice`, { param });
    seen.add(name);
  }
  return PASSTHROUGH_CLASS_NAMES.filter((name) => seen.has(name));
}

/** Whether two stored lists are the same classes. */
export const sameClasses = (a: readonly PassthroughClass[], b: readonly PassthroughClass[]): boolean =>
  a.length === b.length && a.every((name, i) => b[i] === name);
