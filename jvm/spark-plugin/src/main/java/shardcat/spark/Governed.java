package shardcat.spark;

import java.security.SecureRandom;
import java.util.HexFormat;

import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.catalog.Identifier;

/**
 * The mark of a table load that the plan has already wrapped in the table's row filter and column
 * masks. The parser rewrites a governed table's relation into "filter and masks over
 * catalog.schema.MARK.table"; only loads through that mark are answered with the governed table,
 * every other load of it is refused. The mark is random per JVM, and a query or a table name that
 * names it is refused, so a user cannot reach the raw rows by naming it.
 */
final class Governed {
  static final String MARK = "__shardcat_governed_" + HexFormat.of().formatHex(randomBytes());

  private Governed() {}

  private static byte[] randomBytes() {
    byte[] bytes = new byte[12];
    new SecureRandom().nextBytes(bytes);
    return bytes;
  }

  /** The identifier without the mark, or null if it carries none. */
  static Identifier unmarked(Identifier ident) {
    String[] ns = ident.namespace();
    if (ns.length == 2 && ns[1].equals(MARK)) {
      return Identifier.of(new String[] {ns[0]}, ident.name());
    }
    return null;
  }

  static void refuseMarker(String text) {
    if (text != null && text.contains(MARK)) {
      throw new CatalogException("PERMISSION_DENIED", "This name is reserved for the engine.", null);
    }
  }

  static void refuseMarkerIn(LogicalPlan plan) {
    QueryNames.relations(plan).forEach((UnresolvedRelation r) -> refuseMarker(r.multipartIdentifier().mkString(".")));
  }
}
