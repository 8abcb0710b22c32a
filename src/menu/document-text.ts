/** Expanded trait texts by id (as UTF-8, spliced in as they are), each looked up once. */
export class TraitDocs {
  readonly docs = new Map<string, Buffer>();
  private readonly asked = new Set<string>();

  constructor(private readonly lookup: (ids: string[]) => Promise<Array<{ id: string; doc: string }>>) {}

  /** Looks up the traits of `ids` not asked for yet (unknown and deleted ones stay absent). */
  async load(ids: string[]): Promise<void> {
    const fresh = [...new Set(ids)].filter((id) => !this.asked.has(id));
    if (fresh.length === 0) return;
    for (const id of fresh) this.asked.add(id);
    for (const row of await this.lookup(fresh)) this.docs.set(row.id, Buffer.from(row.doc, 'utf8'));
  }
}

export interface SectionRow {
  doc: string;
  traits?: string[];
}

const TRAITS_OPEN = Buffer.from(', "traits" : [');
const ITEM_SEPARATOR = Buffer.from(',');
const TRAIT_SEPARATOR = Buffer.from(', ');
const PRODUCT_END = Buffer.from(']}');

/**
 * Products' JSON texts (objects), each with `"traits" : [...]` appended from the trait texts it
 * names, as one chunk of a document's products array (led by a comma unless `first`). Built from
 * buffers: joining the strings of a large expanded menu and encoding them held the event loop far
 * longer than copying the already encoded trait texts does.
 */
export function expandedChunk(rows: SectionRow[], traits: ReadonlyMap<string, Buffer>, first: boolean): Buffer {
  const parts: Buffer[] = [];
  for (const [index, row] of rows.entries()) {
    if (index > 0 || !first) parts.push(ITEM_SEPARATOR);
    parts.push(Buffer.from(row.doc.slice(0, -1), 'utf8'), TRAITS_OPEN);
    let named = 0;
    for (const id of row.traits ?? []) {
      const doc = traits.get(id);
      if (doc === undefined) continue;
      if (named++ > 0) parts.push(TRAIT_SEPARATOR);
      parts.push(doc);
    }
    parts.push(PRODUCT_END);
  }
  return Buffer.concat(parts);
}

/** `,"key":value` for each field, to close a document with. */
export function trailerJson(fields: Record<string, unknown>): string {
  return Object.entries(fields)
    .map(([key, value]) => `,${JSON.stringify(key)}:${JSON.stringify(value)}`)
    .join('');
}
