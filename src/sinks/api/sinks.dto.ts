import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  IsArray,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateBy,
  ValidateIf,
  ValidationArguments,
} from 'class-validator';
import { PageQuery } from '../../common/pagination.js';
import { IsResourceTypes } from '../../common/resource-types.validator.js';
import { RESOURCE_TYPE_NAMES } from '../../domain/resource-type-names.js';
import { SINK_KINDS, SINK_STATES, TABLE_LAYOUTS } from '../sink.js';
import { AFTER_MESSAGE, SINK_ORDERS } from '../sink-page.js';
import type { SinkOrder } from '../sink-page.js';
import { SINK_FROM_MESSAGE } from '../sink-start.js';
import { isHttpUrl } from '../sink-url.js';
import type { SinkKind, SinkState, TableLayout } from '../sink.js';
import { isTableKind, parseTableUrl, SCHEMA_PATTERN, TABLE_PREFIX_PATTERN } from '../tables/table-target.js';

export const CHANGE_TYPES: string[] = [...RESOURCE_TYPE_NAMES];

/** Why `url` does not fit the sink's kind (`kind` absent on PATCH: an http(s) URL or a table target's), or null. */
function sinkUrlProblem(value: unknown, kind: unknown): string | null {
  if (typeof value !== 'string') return 'url must be an http(s) URL';
  if (typeof kind === 'string' && isTableKind(kind)) {
    const target = parseTableUrl(kind, value);
    return typeof target === 'string' ? target : null;
  }
  if (isHttpUrl(value)) return null;
  if (kind === undefined && /^(postgres|postgresql|mysql):/.test(value)) return null;
  return 'url must be an http(s) URL';
}
function IsSinkUrl() {
  return ValidateBy({
    name: 'isSinkUrl',
    validator: {
      validate: (value: unknown, args?: ValidationArguments) =>
        sinkUrlProblem(value, (args?.object as { kind?: unknown }).kind) === null,
      defaultMessage: (args?: ValidationArguments) =>
        sinkUrlProblem(args?.value, (args?.object as { kind?: unknown }).kind) ?? 'url must be an http(s) URL',
    },
  });
}

class SinkFilterDto {
  @ApiPropertyOptional({
    description: 'Resource types it follows, in the singular (product, not products); default CHANGES_TYPES',
    enum: CHANGE_TYPES,
    isArray: true,
  })
  @IsOptional()
  @IsResourceTypes('types')
  @ArrayMaxSize(CHANGE_TYPES.length)
  types?: string[];

  @ApiPropertyOptional({ description: 'Owners it follows; default every owner', type: [String] })
  @IsOptional()
  @IsArray({ message: 'owner_ids must be an array of owner ids' })
  @ArrayMaxSize(1000)
  @IsString({ each: true, message: 'owner_ids must be an array of owner ids' })
  @MinLength(1, { each: true, message: 'owner_ids must be an array of owner ids' })
  @MaxLength(255, { each: true })
  owner_ids?: string[];

  @ApiPropertyOptional({ default: 100, minimum: 1, maximum: 10000 })
  @IsOptional()
  @IsInt({ message: 'batch_size must be an integer from 1 to 10000' })
  @Min(1, { message: 'batch_size must be an integer from 1 to 10000' })
  @Max(10000, { message: 'batch_size must be an integer from 1 to 10000' })
  batch_size?: number;

  @ApiPropertyOptional({
    default: 15000,
    minimum: 100,
    maximum: 300000,
    description: 'http: how long a batch may take to be answered',
  })
  @IsOptional()
  @IsInt({ message: 'timeout_ms must be an integer from 100 to 300000' })
  @Min(100, { message: 'timeout_ms must be an integer from 100 to 300000' })
  @Max(300000, { message: 'timeout_ms must be an integer from 100 to 300000' })
  timeout_ms?: number;
}

export class CreateSinkDto extends SinkFilterDto {
  @ApiProperty({ enum: SINK_KINDS })
  @IsIn(SINK_KINDS, { message: `kind must be one of ${SINK_KINDS.join(', ')}` })
  kind!: SinkKind;

  @ApiPropertyOptional({
    description:
      'http: where batches are POSTed; postgres: postgres://user:password@host:port/database; mysql: mysql://user:password@host:port/database (the password is sealed, and shown masked)',
  })
  @ValidateIf((dto: CreateSinkDto) => dto.kind === 'http' || isTableKind(dto.kind) || dto.url !== undefined)
  @IsSinkUrl()
  @MaxLength(2000, { message: 'url must be an http(s) URL of at most 2000 characters' })
  url?: string;

  @ApiPropertyOptional({ default: 'menu_sync', description: 'postgres: the schema of the tables (created if absent)' })
  @IsOptional()
  @Matches(SCHEMA_PATTERN, {
    message: 'schema must be a lowercase identifier (a-z 0-9 _, at most 63, not starting with a digit)',
  })
  schema?: string;

  @ApiPropertyOptional({ default: 'menu_sync_', description: "mysql: the prefix of the tables' names" })
  @IsOptional()
  @Matches(TABLE_PREFIX_PATTERN, {
    message: 'table_prefix must be a lowercase identifier (a-z 0-9 _, at most 32, not starting with a digit)',
  })
  table_prefix?: string;

  @ApiPropertyOptional({
    enum: TABLE_LAYOUTS,
    default: 'document',
    description: 'postgres, mysql: the tables it writes (docs/reference.md §12); fixed at creation',
  })
  @ValidateIf((dto: CreateSinkDto) => dto.layout !== undefined)
  @IsIn(TABLE_LAYOUTS, { message: `layout must be one of ${TABLE_LAYOUTS.join(', ')}` })
  layout?: TableLayout;

  @ApiPropertyOptional({ default: 'MENU_SYNC', description: 'nats: the JetStream stream (created if absent)' })
  @IsOptional()
  @Matches(/^[A-Za-z0-9_-]{1,128}$/, { message: 'stream must be a JetStream stream name (A-Z a-z 0-9 _ -)' })
  stream?: string;

  @ApiPropertyOptional({ default: 'menu', description: 'nats: subjects are <subject_prefix>.<owner_id>.<type>.<id>' })
  @IsOptional()
  @Matches(/^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$/, {
    message: 'subject_prefix must be NATS subject tokens separated by dots',
  })
  subject_prefix?: string;

  @SinkFrom()
  @IsOptional()
  from?: string;
}

/** `from` of a sink's creation and of a replay (docs/reference.md §12); a cursor is decoded by parseSinkFrom. */
function SinkFrom(required = false): PropertyDecorator {
  return applyDecorators(
    (required ? ApiProperty : ApiPropertyOptional)({
      description:
        'Where it starts: "snapshot" (the current state of every live resource it follows, then the changes after it), "start" (every change the log keeps), "now" (only later changes), or a changes cursor (the changes after it)',
      ...(required ? {} : { default: 'snapshot' }),
    }),
    IsString({ message: SINK_FROM_MESSAGE }),
    Matches(/^[A-Za-z0-9_-]{1,400}$/, { message: SINK_FROM_MESSAGE }),
  );
}

export class UpdateSinkDto extends SinkFilterDto {
  @ApiPropertyOptional({ description: 'http: where batches are POSTed; postgres, mysql: the target database' })
  @IsOptional()
  @IsSinkUrl()
  @MaxLength(2000, { message: 'url must be an http(s) URL of at most 2000 characters' })
  url?: string;

  @ApiPropertyOptional({
    enum: ['active', 'disabled'],
    description: 'active re-enables a disabled sink (and retries at once)',
  })
  @IsOptional()
  @IsIn(['active', 'disabled'], { message: 'state must be active or disabled' })
  state?: 'active' | 'disabled';

  /** A target's tables are never rewritten into another layout: a new sink is made for it. */
  @ValidateBy({
    name: 'isFixedLayout',
    validator: {
      validate: () => false,
      defaultMessage: () => 'layout is fixed at creation: create another sink with the layout wanted',
    },
  })
  @ValidateIf((dto: UpdateSinkDto) => dto.layout !== undefined)
  layout?: never;
}

export class ReplaySinkDto {
  @SinkFrom(true)
  from!: string;
}

/** `GET /api/v1/sinks` (docs/reference.md §13): a page, its filters and its order. */
export class ListSinksQuery extends PageQuery {
  @ApiPropertyOptional({ description: 'next_cursor of the previous page (of the same order)' })
  @IsOptional()
  @Matches(/^[A-Za-z0-9_-]{1,200}$/, { message: AFTER_MESSAGE })
  after?: string;

  @ApiPropertyOptional({ enum: SINK_STATES })
  @IsOptional()
  @IsIn(SINK_STATES, { message: `state must be one of ${SINK_STATES.join(', ')}` })
  state?: SinkState;

  @ApiPropertyOptional({ enum: SINK_KINDS })
  @IsOptional()
  @IsIn(SINK_KINDS, { message: `kind must be one of ${SINK_KINDS.join(', ')}` })
  kind?: SinkKind;

  @ApiPropertyOptional({
    enum: SINK_ORDERS,
    default: 'created',
    description:
      'created: oldest first; failing: failing, retrying, disabled, then active sinks, each by the oldest failing_since, then by creation',
  })
  @IsOptional()
  @IsIn(SINK_ORDERS, { message: `order must be one of ${SINK_ORDERS.join(', ')}` })
  order: SinkOrder = 'created';

  @ApiPropertyOptional({ description: 'sinks whose owner_ids name this owner' })
  @IsOptional()
  @IsString({ message: 'owner_id must be an owner id' })
  @MinLength(1, { message: 'owner_id must be an owner id' })
  @MaxLength(255, { message: 'owner_id must be an owner id of at most 255 characters' })
  owner_id?: string;

  @ApiPropertyOptional({ description: 'sinks whose id starts with it, or whose owner_ids name it' })
  @IsOptional()
  @IsString({ message: 'q must be a sink id prefix or an owner id' })
  @MinLength(1, { message: 'q must be a sink id prefix or an owner id' })
  @MaxLength(255, { message: 'q must be a sink id prefix or an owner id of at most 255 characters' })
  q?: string;
}
