/** A result for the user, as indented JSON on stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Rows as a table with a header, columns padded to their widest cell (as `docker ps` and `kubectl get` print). */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((name, column) => Math.max(name.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column])))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}
