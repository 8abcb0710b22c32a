import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsDate, IsOptional } from 'class-validator';
import { IsoDate } from '../common/iso-date.js';

/** `GET /api/v1/activity?since=&until=`: ISO 8601 instants, by default the last 24 hours. */
export class ActivityQuery {
  @ApiPropertyOptional({ description: 'The first minute (ISO 8601); by default 24 hours before until' })
  @IsOptional()
  @IsoDate()
  @IsDate({ message: 'since must be an ISO 8601 instant' })
  since?: Date;

  @ApiPropertyOptional({ description: 'The last minute (ISO 8601); by default now' })
  @IsOptional()
  @IsoDate()
  @IsDate({ message: 'until must be an ISO 8601 instant' })
  until?: Date;
}
