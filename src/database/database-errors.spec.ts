import { isDataError, isTransientDatabaseError } from './database-errors.js';

const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { code });
const wrapped = (code: string) => Object.assign(new Error('query failed'), { driverError: pgError(code) });

describe('database error classes', () => {
  it.each(['08006', '08001', '57P01', '57P03', '53100', '25006', '57014', '40001', '40P01'])(
    'treats SQLSTATE %s as transient, bare or wrapped by TypeORM',
    (code) => {
      expect(isTransientDatabaseError(pgError(code))).toBe(true);
      expect(isTransientDatabaseError(wrapped(code))).toBe(true);
      expect(isDataError(wrapped(code))).toBe(false);
    },
  );

  it('treats the pool and socket refusals as transient', () => {
    expect(isTransientDatabaseError(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isTransientDatabaseError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientDatabaseError(Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }))).toBe(true);
  });

  it('does not treat data errors or programming errors as transient', () => {
    for (const code of ['22P02', '23505', '54000', '42P01', '42703'])
      expect(isTransientDatabaseError(wrapped(code))).toBe(false);
    expect(isTransientDatabaseError(new TypeError('x is undefined'))).toBe(false);
    expect(isTransientDatabaseError(undefined)).toBe(false);
  });
});
