/**
 * A reporter that ends the run with each project's wall time (its first file's start to its last
 * file's end), its files and tests: the figures the README's development section quotes. The
 * projects run one after the other (sequence.groupOrder in vitest.config.ts), so the walls add up.
 */
import type { Reporter, TestModule } from 'vitest/node';

interface Span {
  start: number;
  end: number;
  files: number;
  tests: number;
}

export default class ProjectDurations implements Reporter {
  private readonly spans = new Map<string, Span>();

  onTestModuleStart(module: TestModule): void {
    const name = module.project.name || 'default';
    const span = this.spans.get(name) ?? { start: Date.now(), end: Date.now(), files: 0, tests: 0 };
    this.spans.set(name, span);
  }

  onTestModuleEnd(module: TestModule): void {
    const span = this.spans.get(module.project.name || 'default');
    if (!span) return;
    span.end = Date.now();
    span.files += 1;
    span.tests += [...module.children.allTests()].length;
  }

  onTestRunEnd(): void {
    if (!this.spans.size) return;
    const lines = [...this.spans].map(
      ([name, s]) =>
        `  ${name.padEnd(6)} ${((s.end - s.start) / 1000).toFixed(1).padStart(7)} s   ${String(s.files).padStart(3)} files  ${String(s.tests).padStart(4)} tests`,
    );
    console.log(`\nWall time per project:\n${lines.join('\n')}\n`);
  }
}
