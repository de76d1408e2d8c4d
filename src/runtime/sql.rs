//! Reading SQLite rows as the runtime gives them (`SqlCursor::raw()`, rows of
//! `SqlStorageValue`), by hand: deserialising rows into structs
//! (`to_array()`, `one()`) links serde_wasm_bindgen, a few KiB of the upload.

use worker::{SqlCursor, SqlStorageValue};

/// The cursor's first row, if any.
pub fn first(cursor: SqlCursor) -> worker::Result<Option<Vec<SqlStorageValue>>> {
    cursor.raw().next().transpose()
}

/// The first column of the cursor's first row, if any.
pub fn value(cursor: SqlCursor) -> worker::Result<Option<SqlStorageValue>> {
    Ok(first(cursor)?.and_then(|row| row.into_iter().next()))
}

pub fn text(value: &SqlStorageValue) -> Option<String> {
    match value {
        SqlStorageValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A count, an id or a time; a negative integer (none is stored) reads as 0.
pub fn number(value: &SqlStorageValue) -> Option<u64> {
    match value {
        SqlStorageValue::Integer(n) => Some((*n).max(0) as u64),
        _ => None,
    }
}
