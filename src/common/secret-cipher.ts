import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { AppConfig } from '../config/app-config.js';
import { localSecret } from '../config/local-secrets.js';

const FORMAT_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The file holding the generated token encryption key of embedded mode. */
export const LOCAL_TOKEN_KEY_FILE = 'token.key';

/**
 * AES-256-GCM for secrets at rest: tokens, and raw webhook bodies that hold their key. A sealed
 * value is `version | iv | tag | ciphertext`; the associated data binds it to its row and column,
 * so a ciphertext copied to another row or swapped between columns does not open.
 */
export class SecretCipher {
  private constructor(private readonly key: Buffer) {}

  /** TOKEN_ENCRYPTION_KEY, or in embedded mode a key generated once into DATA_DIR (mode 0600). */
  static async create(config: AppConfig): Promise<SecretCipher> {
    const encoded = config.TOKEN_ENCRYPTION_KEY ?? (await localSecret(config.DATA_DIR, LOCAL_TOKEN_KEY_FILE));
    return SecretCipher.fromKey(Buffer.from(encoded, 'base64'));
  }

  static fromKey(key: Buffer): SecretCipher {
    if (key.length !== 32) throw new Error('the token encryption key must be 32 bytes');
    return new SecretCipher(key);
  }

  seal(plaintext: string, associatedData: string): Buffer {
    return this.sealBytes(Buffer.from(plaintext, 'utf8'), associatedData);
  }

  /** Throws when the value was not sealed with this key for this associated data. */
  open(sealed: Buffer, associatedData: string): string {
    return this.openBytes(sealed, associatedData).toString('utf8');
  }

  /** As `seal`, for bytes that need not be text (a raw webhook body in any charset). */
  sealBytes(plaintext: Buffer, associatedData: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return Buffer.concat([Buffer.from([FORMAT_VERSION]), iv, cipher.getAuthTag(), ciphertext]);
  }

  openBytes(sealed: Buffer, associatedData: string): Buffer {
    if (sealed.length < 1 + IV_BYTES + TAG_BYTES || sealed[0] !== FORMAT_VERSION) throw new Error('not a sealed value');
    const iv = sealed.subarray(1, 1 + IV_BYTES);
    const tag = sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
  }
}
