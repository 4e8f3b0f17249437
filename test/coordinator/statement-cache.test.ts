/** The SQLite statement cache: one prepared statement per SQL text, least recently used evicted. */

import SQLite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { withStatementCache } from '../../coordinator/storage/statement-cache.ts';

describe('withStatementCache', () => {
  it('reuses the statement for a SQL text, keeps results right, and evicts the least recently used', () => {
    const file = new SQLite(':memory:');
    const db = withStatementCache(file);
    db.prepare('create table t (n integer)').run([]);
    const insert = db.prepare('insert into t (n) values (?)');
    expect(db.prepare('insert into t (n) values (?)')).toBe(insert);
    for (let n = 0; n < 3; n++) db.prepare('insert into t (n) values (?)').run([n]);
    expect(db.prepare('select sum(n) as s from t').all([])).toEqual([{ s: 3 }]);
    // 600 other texts push the insert out (capacity 512); it is prepared afresh and still works.
    for (let i = 0; i < 600; i++) db.prepare(`select ${i} as v`).all([]);
    const again = db.prepare('insert into t (n) values (?)');
    expect(again).not.toBe(insert);
    again.run([10]);
    expect(db.prepare('select sum(n) as s from t').all([])).toEqual([{ s: 13 }]);
    db.close();
    expect(file.open).toBe(false);
  });
});
