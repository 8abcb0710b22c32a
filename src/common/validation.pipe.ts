import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { BadRequestError } from './app-error.js';

function first(errors: ValidationError[], prefix = ''): { field: string; message: string } {
  const error = errors[0];
  const field = prefix ? `${prefix}.${error.property}` : error.property;
  if (error.constraints) return { field, message: Object.values(error.constraints)[0] };
  return first(error.children ?? [], field);
}

/**
 * Query and body validation; a failure is a 400 problem naming the first field at fault. Path
 * parameters are left to their own pipes: converting `1e3` to 1000 first would hide the error.
 */
class QueryAndBodyValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    return metadata.type === 'param' ? value : super.transform(value, metadata);
  }
}

/** `validateCustomDecorators`: also validate parameters of custom decorators (e.g. a parsed JSON body). */
export function createValidationPipe(options: { validateCustomDecorators?: boolean } = {}): ValidationPipe {
  return new QueryAndBodyValidationPipe({
    ...options,
    transform: true,
    whitelist: true,
    forbidNonWhitelisted: true,
    exceptionFactory: (errors) => {
      const { field, message } = first(errors);
      return new BadRequestError(message, field);
    },
  });
}
