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

/** Ids as lists show them: at least 8 characters, as the console shows them, and as many more as tell them apart. */
export function shortIds(ids: string[]): Map<string, string> {
  const sorted = [...ids].sort();
  const shown = new Map<string, string>();
  sorted.forEach((id, index) => {
    const common = (other: string | undefined) => {
      if (other === undefined) return 0;
      let length = 0;
      while (length < id.length && id[length] === other[length]) length++;
      return length;
    };
    const length = Math.max(8, common(sorted[index - 1]) + 1, common(sorted[index + 1]) + 1);
    shown.set(id, id.slice(0, length));
  });
  return shown;
}
