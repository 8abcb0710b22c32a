import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { toInt } from '../common/pagination.js';

const MESSAGE = 'lag_threshold must be an integer from 1 to 9999999999';

export class StatusQuery {
  @ApiPropertyOptional({ description: 'projector lag that needs attention whatever its trend', default: 10000 })
  @IsOptional()
  @Transform(toInt)
  @IsInt({ message: MESSAGE })
  @Min(1, { message: MESSAGE })
  @Max(9_999_999_999, { message: MESSAGE })
  lag_threshold?: number;
}
