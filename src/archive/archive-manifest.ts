import { open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';

/** The checkpoint of one projection an archived partition relies on: a replay starts at or after it. */
export interface ManifestCheckpoint {
  transaction_id: string;
  position: string;
}

/** One file of the archive, as `manifest.json` lists it (docs/reference.md §8, The archive). */
export interface ManifestEntry {
  file: string;
  partition: string;
  /** The partition's range: positions from `lower_bound` (inclusive) to `upper_bound` (exclusive). */
  lower_bound: number;
  upper_bound: number;
  first_position: number | null;
  last_position: number | null;
  events: number;
  bytes: number;
  sha256: string;
  events_sha256: string;
  rows_sha256: string;
  /** The position of the oldest of `checkpoints`. */
  checkpoint_position: number | null;
  checkpoints: Record<string, ManifestCheckpoint>;
  state: 'exported' | 'archived' | 'restored';
  archived_at: string | null;
}

export interface Manifest {
  format: 'menu-sync-event-log-archive';
  version: 1;
  /** Positions below it are archived, unless a `restored` entry holds them. */
  horizon: number;
  files: ManifestEntry[];
}

export const MANIFEST = 'manifest.json';

/** The manifest of `directory`, or an empty one when there is none yet. */
export async function readManifest(directory: string): Promise<Manifest> {
  try {
    return JSON.parse(await readFile(path.join(directory, MANIFEST), 'utf8')) as Manifest;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    return { format: 'menu-sync-event-log-archive', version: 1, horizon: 0, files: [] };
  }
}

/** Writes the manifest through a temporary name, fsynced and renamed: a reader sees the old one or the new one. */
export async function writeManifest(directory: string, files: ManifestEntry[]): Promise<void> {
  const horizon = Math.max(0, ...files.filter((file) => file.state === 'archived').map((file) => file.upper_bound));
  const manifest: Manifest = { format: 'menu-sync-event-log-archive', version: 1, horizon, files };
  const target = path.join(directory, MANIFEST);
  const temporary = `${target}.partial`;
  const handle = await open(temporary, 'w');
  try {
    await handle.writeFile(`${JSON.stringify(manifest, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, target);
}
