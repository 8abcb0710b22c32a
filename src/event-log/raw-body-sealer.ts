import { Injectable } from '@nestjs/common';
import { SecretCipher } from '../common/secret-cipher.js';

/**
 * Keeps the webhook key out of the database in clear while `/raw` still answers the exact bytes
 * (the platform puts the callback URI, key included, in every event): the key itself is stored
 * sealed beside the redacted bytes — the same sealed value for every entry of that key, made once
 * — or, rarely, the whole body is (bound to its event id).
 */
@Injectable()
export class RawBodySealer {
  /** Per key id, the key last sealed for it: one seal per key, not per delivery (the hot path). */
  private readonly sealedKeys = new Map<string, { key: string; sealed: Buffer }>();

  constructor(private readonly cipher: SecretCipher) {}

  /** The key sealed for entries of `keyId`; computed once per key. */
  sealKey(keyId: string, key: string): Buffer {
    const cached = this.sealedKeys.get(keyId);
    if (cached !== undefined && cached.key === key) return cached.sealed;
    const sealed = this.cipher.seal(key, `webhook-key:${keyId}`);
    if (this.sealedKeys.size > 1000) this.sealedKeys.clear();
    this.sealedKeys.set(keyId, { key, sealed });
    return sealed;
  }

  openKey(keyId: string, sealed: Buffer): string {
    return this.cipher.open(sealed, `webhook-key:${keyId}`);
  }

  seal(eventId: string, raw: Buffer): Buffer {
    return this.cipher.sealBytes(raw, associatedData(eventId));
  }

  /** Throws when the bytes were not sealed for this event with the daemon's key. */
  open(eventId: string, sealed: Buffer): Buffer {
    return this.cipher.openBytes(sealed, associatedData(eventId));
  }
}

function associatedData(eventId: string): string {
  return `event:${eventId}:raw`;
}
