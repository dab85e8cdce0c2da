/**
 * Once per run, before the first project that spawns Nexus (e2e, timed): compile src/ to dist/
 * (scripts/build.mjs), so every Nexus the tests start as a process runs the built server with plain
 * node, as `npm start` and the container image do, without paying tsx's start-up and transform in
 * each one; and build the console (dist/console, as `npm run build` does) for its browser tests, once:
 * a file that rebuilt it while another's page loaded it would find it gone. Both projects name this
 * setup; the second finds the build done (global setups run in vitest's own process, so the mark in
 * its environment is seen by the next one).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from './paths.js';

const BUILT = 'NEXUS_TEST_DIST_BUILT';

export default function setup(): void {
  if (process.env[BUILT]) return;
  execFileSync(process.execPath, [join(projectRoot, 'scripts', 'build.mjs')], { cwd: projectRoot, stdio: 'inherit' });
  execFileSync(process.execPath, [join(projectRoot, 'scripts', 'build-console.mjs')], { cwd: projectRoot, stdio: 'inherit' });
  process.env[BUILT] = '1';
}
