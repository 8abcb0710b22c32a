import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * A secret generated once into DATA_DIR (mode 0600) and read back on later starts: used only in
 * embedded mode, where nothing else can be expected to provide it.
 */
export async function localSecret(dataDir: string, name: string, bytes = 32): Promise<string> {
  const file = path.resolve(dataDir, name);
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const secret = randomBytes(bytes).toString('base64url');
  try {
    await writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' });
    return secret;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return (await readFile(file, 'utf8')).trim();
  }
}

/** The file holding the local webhook key of embedded mode. */
export const LOCAL_WEBHOOK_KEY_FILE = 'webhook.key';
