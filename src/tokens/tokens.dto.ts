import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsIn,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  MinLength,
  ValidateBy,
  ValidationArguments,
} from 'class-validator';
import { PageQuery } from '../common/pagination.js';
import type { ApiRole } from '../config/app-config.js';
import { isIso8601 } from '../domain/iso-8601.js';

export const TOKEN_ROLES = ['read', 'admin'] as const;
export const TOKEN_AFTER_MESSAGE = 'after must be the next_cursor of the previous page';
const OWNER_IDS_MESSAGE = 'owner_ids must be a non-empty array of owner ids';

/** `owner_ids` narrows a read token; an admin token sees every owner, so it takes none. */
function OnlyForReadTokens() {
  return ValidateBy({
    name: 'onlyForReadTokens',
    validator: {
      validate: (_value: unknown, args?: ValidationArguments) => (args?.object as { role?: unknown }).role !== 'admin',
      defaultMessage: () => 'owner_ids is for read tokens only: an admin token sees every owner',
    },
  });
}

/** Date.parse rolls 2030-02-30 over to March: the day must be one of its month. */
function realDay(value: string): boolean {
  const [year, month, day] = value.slice(0, 10).split('-').map(Number);
  return new Date(Date.UTC(year, month - 1, day)).getUTCDate() === day;
}

function IsInstant() {
  return ValidateBy({
    name: 'isInstant',
    validator: {
      validate: (value: unknown) => isIso8601(value) && realDay(value),
      defaultMessage: () => 'expires_at must be an ISO 8601 date and time with an offset (2030-01-31T12:00:00Z)',
    },
  });
}

/** `POST /api/v1/tokens` (docs/reference.md §12). */
export class CreateTokenDto {
  @ApiProperty({ description: 'Who holds it (shown in lists and the audit log)', maxLength: 200 })
  @IsString({ message: 'name must be a text of 1 to 200 characters' })
  @Matches(/\S/, { message: 'name must be a text of 1 to 200 characters' })
  @MaxLength(200, { message: 'name must be a text of 1 to 200 characters' })
  name!: string;

  @ApiProperty({ enum: TOKEN_ROLES, description: 'read may only read; admin may do everything' })
  @IsIn(TOKEN_ROLES, { message: 'role must be read or admin' })
  role!: ApiRole;

  @ApiPropertyOptional({ type: [String], description: 'read tokens only: the owners it sees (default every owner)' })
  @IsOptional()
  @OnlyForReadTokens()
  @IsArray({ message: OWNER_IDS_MESSAGE })
  @ArrayMinSize(1, { message: OWNER_IDS_MESSAGE })
  @ArrayMaxSize(1000, { message: 'owner_ids must list at most 1000 owners' })
  @IsString({ each: true, message: OWNER_IDS_MESSAGE })
  @MinLength(1, { each: true, message: OWNER_IDS_MESSAGE })
  @MaxLength(255, { each: true, message: 'owner_ids must be owner ids of at most 255 characters' })
  owner_ids?: string[];

  @ApiPropertyOptional({ description: 'ISO 8601 instant after which it is refused (default never)' })
  @IsOptional()
  @IsInstant()
  expires_at?: string;
}

/** `GET /api/v1/tokens`: oldest first, a page at a time. */
export class ListTokensQuery extends PageQuery {
  @ApiPropertyOptional({ description: 'next_cursor of the previous page' })
  @IsOptional()
  @Matches(/^[A-Za-z0-9_-]{1,200}$/, { message: TOKEN_AFTER_MESSAGE })
  after?: string;
}
