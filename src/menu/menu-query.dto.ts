import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, MaxLength } from 'class-validator';
import { AsOfQuery } from '../query/resource-query.dto.js';

/** The query of `/menu`: the owner, the form, and `as_of` (AsOfQuery's). */
export class MenuQuery extends AsOfQuery {
  @ApiProperty()
  @IsString({ message: 'owner_id is required' })
  @MaxLength(255)
  owner_id: string;

  @ApiPropertyOptional({
    enum: ['expanded', 'normalized'],
    default: 'expanded',
    description:
      'expanded: products with their traits and trait options (docs/reference.md §5); normalized: collections, products, traits and trait_options each listed once, linked by ids',
  })
  @IsOptional()
  @IsIn(['expanded', 'normalized'], { message: 'form must be expanded or normalized' })
  form: 'expanded' | 'normalized' = 'expanded';
}
