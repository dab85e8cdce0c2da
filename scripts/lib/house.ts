/**
 * The house numbers (docs/architecture.md, "House numbers"): the lines each layer holds, the source files over
 * FILE_LINES lines, the functions over FUNCTION_LINES lines (a factory's closure counts as one function), and the
 * imports against the layer rule. `npm run lint:layers -- --house` prints them.
 *
 * Lines are counted as `wc -l` counts them. A function's lines run from its first line to its last, both counted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { checkLayers, layerLines, sourceFiles } from './layers.js';

const FILE_LINES = 450;
const FUNCTION_LINES = 150;
/** Where source files are measured (tests are not). */
const MEASURED = ['src', 'console/src', 'scripts'];

interface LongFunction {
  file: string;
  line: number;
  name: string;
  lines: number;
}

export interface HouseNumbers {
  layers: { name: string; files: number; lines: number }[];
  longFiles: { file: string; lines: number }[];
  longFunctions: LongFunction[];
  /** Imports up a layer, across peers, or from a file no layer holds (checkLayers). */
  againstLayers: number;
}

const countLines = (text: string) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

/** What a function is called where it is declared: its name, or that of the variable or property it is assigned to. */
function nameOf(fn: ts.SignatureDeclaration): string {
  if (fn.name) return fn.name.getText();
  const parent = fn.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && parent.name) return parent.name.getText();
  return '(anonymous)';
}

/** The functions of a file (nested ones too) longer than FUNCTION_LINES. */
function longFunctions(file: string, text: string): LongFunction[] {
  const kind = file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const lines = source.getLineAndCharacterOfPosition(node.end).line - first + 1;
      if (lines > FUNCTION_LINES) found.push({ file, line: first + 1, name: nameOf(node), lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

export function houseNumbers(root: string): HouseNumbers {
  const longFiles: HouseNumbers['longFiles'] = [];
  const functions: LongFunction[] = [];
  for (const file of MEASURED.flatMap((dir) => sourceFiles(root, dir))) {
    const text = readFileSync(join(root, file), 'utf8');
    const lines = countLines(text);
    if (lines > FILE_LINES) longFiles.push({ file, lines });
    functions.push(...longFunctions(file, text));
  }
  return {
    layers: layerLines(root, (file) => countLines(readFileSync(join(root, file), 'utf8'))),
    longFiles: longFiles.sort((a, b) => b.lines - a.lines),
    longFunctions: functions.sort((a, b) => b.lines - a.lines),
    againstLayers: checkLayers(root).length,
  };
}

/** The numbers as the lines of a report. */
export function formatHouse(h: HouseNumbers): string[] {
  return [
    'House numbers',
    'Lines per layer:',
    ...h.layers.map((l) => `  ${l.name.padEnd(28)} ${String(l.lines).padStart(6)} lines in ${l.files} file${l.files === 1 ? '' : 's'}`),
    `Source files over ${FILE_LINES} lines (src/, console/src/, scripts/): ${h.longFiles.length}`,
    ...h.longFiles.map((f) => `  ${String(f.lines).padStart(5)} ${f.file}`),
    `Functions over ${FUNCTION_LINES} lines outside tests: ${h.longFunctions.length}`,
    ...h.longFunctions.map((f) => `  ${String(f.lines).padStart(5)} ${f.file}:${f.line} ${f.name}`),
    `Imports up a layer (or across peers, or from no layer): ${h.againstLayers}`,
  ];
}
