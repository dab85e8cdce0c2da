/**
 * Once per run of the e2e project: compile src/ to dist/ (scripts/build.mjs), so every Nexus
 * the project starts as a process runs the built server with plain node, as `npm start` and
 * the container image do, without paying tsx's start-up and transform in each one.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from './paths.js';

export default function setup(): void {
  execFileSync(process.execPath, [join(projectRoot, 'scripts', 'build.mjs')], { cwd: projectRoot, stdio: 'inherit' });
}
