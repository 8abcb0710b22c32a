/** `lookup` of the distinct `ids`, `size` ids a call and `concurrency` calls at a time. */
export async function inChunks<T>(
  ids: string[],
  lookup: (chunk: string[]) => Promise<T[]>,
  { size, concurrency }: { size: number; concurrency: number },
): Promise<T[]> {
  const unique = [...new Set(ids)];
  const chunks: string[][] = [];
  for (let i = 0; i < unique.length; i += size) chunks.push(unique.slice(i, i + size));
  const found: T[] = [];
  for (let i = 0; i < chunks.length; i += concurrency) {
    for (const rows of await Promise.all(chunks.slice(i, i + concurrency).map(lookup))) found.push(...rows);
  }
  return found;
}
