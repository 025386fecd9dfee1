"""Wire protocols over the catalog: the Iceberg REST catalog, the UC Delta API and Delta commits,
Delta Sharing, OpenLineage, and multi-asset transactions (which commit through Iceberg and Delta).
They use features/ and tree/; nothing below imports them."""
