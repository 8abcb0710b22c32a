import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { makePassword } from './table-sinks.js';

/** The MariaDB (or MySQL) server tests create their target databases on. */
export const TEST_MYSQL = { host: '127.0.0.1', port: 3306, user: 'root', password: '' };

export interface MysqlTarget {
  database: string;
  user: string;
  password: string;
  /** `mysql://user:password@127.0.0.1:3306/database`. */
  url: string;
  /** A root connection to the database (reads the tables, changes them by hand). */
  admin: mysql.Connection;
  drop(): Promise<void>;
}

/** A fresh database and a user with a password that may use only it. */
export async function createMysqlTarget(): Promise<MysqlTarget> {
  const suffix = `${process.pid}_${randomBytes(4).toString('hex')}`;
  const database = `menu_sync_target_${suffix}`;
  const user = `ms_${randomBytes(6).toString('hex')}`;
  const password = makePassword();
  const admin = await mysql.createConnection({ ...TEST_MYSQL, dateStrings: true, supportBigNumbers: true });
  await admin.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
  for (const host of ['%', 'localhost', '127.0.0.1']) {
    await admin.query(`CREATE USER ?@? IDENTIFIED BY ?`, [user, host, password]);
    await admin.query(`GRANT ALL ON \`${database}\`.* TO ?@?`, [user, host]);
  }
  await admin.query(`USE \`${database}\``);
  return {
    database,
    user,
    password,
    url: `mysql://${user}:${encodeURIComponent(password)}@127.0.0.1:3306/${database}`,
    admin,
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
      for (const host of ['%', 'localhost', '127.0.0.1']) await admin.query(`DROP USER IF EXISTS ?@?`, [user, host]);
      await admin.end();
    },
  };
}

/** A table's column names in order. */
export async function mysqlColumns(target: MysqlTarget, table: string): Promise<string[]> {
  const [rows] = await target.admin.query(
    `SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
    [target.database, table],
  );
  return (rows as Array<{ name: string }>).map((row) => row.name);
}
