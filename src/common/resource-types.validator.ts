import { ValidateBy, ValidationArguments } from 'class-validator';
import { RESOURCE_TYPE_NAMES, resourceTypesProblem } from '../domain/resource-type-names.js';

/**
 * `field` lists resource types in the singular (docs/reference.md §11); a plural gets a problem
 * naming the singular: `types: products is a collection name; the type is product`.
 */
export function IsResourceTypes(field: string): PropertyDecorator {
  const problem = (value: unknown) =>
    Array.isArray(value) ? resourceTypesProblem(value) : `must list resource types (${RESOURCE_TYPE_NAMES.join(', ')})`;
  return ValidateBy({
    name: 'isResourceTypes',
    validator: {
      validate: (value: unknown) => problem(value) === null,
      defaultMessage: (args?: ValidationArguments) => `${field}: ${problem(args?.value)}`,
    },
  });
}
