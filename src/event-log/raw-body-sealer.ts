import { Injectable } from '@nestjs/common';
import { TokenCipher } from '../auth/token-cipher.js';

/**
 * Seals the exact bytes of a delivery that hold its webhook key (the platform puts the callback
 * URI in every event), so the key is never in the database in clear while `/raw` still answers
 * those bytes. Bound to the event id: sealed bytes copied to another entry do not open.
 */
@Injectable()
export class RawBodySealer {
  constructor(private readonly cipher: TokenCipher) {}

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
