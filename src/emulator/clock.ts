import { Injectable } from '@nestjs/common';

/** The emulator's time source; tests replace it to move time without waiting. */
@Injectable()
export class Clock {
  private offsetMs = 0;

  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }

  /** Moves this clock forward (e.g. past a token's expiry). */
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
