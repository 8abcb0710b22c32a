import { Injectable, PipeTransform } from '@nestjs/common';
import { BadRequestError } from './app-error.js';

/** A path parameter that must be a positive integer (a log position, a row id). */
@Injectable()
export class PositivePipe implements PipeTransform<string, number> {
  constructor(private readonly field = 'position') {}

  transform(value: string): number {
    if (!/^\d{1,15}$/.test(value) || Number(value) < 1) {
      throw new BadRequestError(`${this.field} must be a positive integer`, this.field);
    }
    return Number(value);
  }
}
