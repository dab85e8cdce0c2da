/**
 * A service or repository is a module of exported functions, each taking its dependencies first
 * (`createPlan(deps, actor, input)`), short enough to read at once. `bindDeps` hands the rest of the
 * code the same functions with those dependencies given once (`plans.createPlan(actor, input)`), so a
 * caller neither knows nor passes what a function depends on, and no closure holds a whole service.
 */
type Fn<D> = (deps: D, ...args: never[]) => unknown;

/** `fns`, each with `deps` as its first argument. */
export type Bound<D, F extends Record<string, Fn<D>>> = {
  [K in keyof F]: F[K] extends (deps: D, ...args: infer A) => infer R ? (...args: A) => R : never;
};

export function bindDeps<D, F extends Record<string, Fn<D>>>(deps: D, fns: F): Bound<D, F> {
  const bound: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(fns)) bound[name] = (fn as (deps: D, ...args: unknown[]) => unknown).bind(undefined, deps);
  return bound as Bound<D, F>;
}
