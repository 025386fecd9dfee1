-- Storage paths compare byte by byte (issue #48): until a cold owner's path index is built, its writes ask
-- this table what lies at, above and below a path (Store.paths_near). "Below" is a range of storage_path,
-- and only a byte-ordered index holds a prefix's paths side by side whatever the database's locale
-- (canonical urls are UTF-8, so byte order is code point order). Equality answers are unchanged.
ALTER TABLE assets ALTER COLUMN storage_path TYPE text COLLATE "C";
