import { ValidationError, ValidationPipe } from '@nestjs/common';
import { BadRequestError } from './app-error.js';

function first(errors: ValidationError[], prefix = ''): { field: string; message: string } {
  const error = errors[0];
  const field = prefix ? `${prefix}.${error.property}` : error.property;
  if (error.constraints) return { field, message: Object.values(error.constraints)[0] };
  return first(error.children ?? [], field);
}

/** Query and body validation; a failure is a 400 problem naming the first field at fault. */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    transform: true,
    whitelist: true,
    forbidNonWhitelisted: true,
    exceptionFactory: (errors) => {
      const { field, message } = first(errors);
      return new BadRequestError(message, field);
    },
  });
}
