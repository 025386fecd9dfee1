package shardcat.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.AliasIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;

import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * What the parser wrapper does with each parsed plan, before Spark analyses it:
 *
 * <ol>
 *   <li>finds every relation naming a table of a shardcat catalog (three-part names, or one- and
 *       two-part names while such a catalog is the current one; CTEs, temporary views and write
 *       targets aside);
 *   <li>resolves them in ONE {@code POST /resolve} per catalog: decisions, assets, views and
 *       functions expanded, credentials; a refusal fails the query here, before anything runs;
 *   <li>rewrites the plan: a catalog view becomes its SQL (its own names qualified with its catalog
 *       and schema, and rewritten the same way), a table with a row filter or column masks (only
 *       trusted engines receive them) becomes "masked columns over filtered rows" of a marked load
 *       ({@link Governed}); plain tables stay, and {@link ShardcatCatalog} serves their loads from
 *       the same answer.
 * </ol>
 */
final class QueryResolver {
  private final SparkSession session;
  private final ParserInterface parser;

  QueryResolver(SparkSession session, ParserInterface parser) {
    this.session = session;
    this.parser = parser;
  }

  LogicalPlan prepare(LogicalPlan plan) {
    Map<String, String[]> catalogs = ShardcatCatalog.configured(session);
    if (catalogs.isEmpty()) {
      return plan;
    }
    Governed.refuseMarkerIn(plan);
    Set<String> ctes = QueryNames.cteNames(plan);
    Map<String, Set<String>> wanted = new LinkedHashMap<>();
    for (UnresolvedRelation r : QueryNames.relations(plan)) {
      String[] name = qualify(names(r), catalogs, ctes);
      if (name != null && batched(catalogs.get(name[0]))) {
        wanted.computeIfAbsent(name[0], k -> new LinkedHashSet<>()).add(String.join(".", name));
      }
    }
    if (wanted.isEmpty()) {
      return plan;
    }
    for (Map.Entry<String, Set<String>> e : wanted.entrySet()) {
      String[] conf = catalogs.get(e.getKey());
      Answers.record(Answers.scope(e.getKey(), conf[0], conf[1]),
          CatalogClient.of(conf[0], conf[1]).resolve(new ArrayList<>(e.getValue())));
    }
    return rewrite(plan, catalogs, ctes, 0);
  }

  private static boolean batched(String[] conf) {
    return !"false".equalsIgnoreCase(conf[2]);
  }

  private static List<String> names(UnresolvedRelation r) {
    return CollectionConverters.asJava(r.multipartIdentifier());
  }

  /** [catalog, schema, table] of a relation naming a shardcat catalog's table, else null. */
  private String[] qualify(List<String> parts, Map<String, String[]> catalogs, Set<String> ctes) {
    if (parts.size() == 3) {
      return catalogs.containsKey(parts.get(0).toLowerCase(Locale.ROOT)) ? lower(parts) : null;
    }
    var manager = session.sessionState().catalogManager();
    String current = manager.currentCatalog().name().toLowerCase(Locale.ROOT);
    if (!catalogs.containsKey(current) || parts.size() > 2) {
      return null;
    }
    if (parts.size() == 2) {
      return catalogs.containsKey(parts.get(0).toLowerCase(Locale.ROOT)) ? null
          : lower(List.of(current, parts.get(0), parts.get(1)));
    }
    String one = parts.get(0);
    String[] ns = manager.currentNamespace();
    if (ctes.contains(one.toLowerCase(Locale.ROOT)) || ns.length != 1
        || session.sessionState().catalog().getTempView(one).isDefined()) {
      return null;
    }
    return lower(List.of(current, ns[0], one));
  }

  private static String[] lower(List<String> parts) {
    return parts.stream().map(p -> p.toLowerCase(Locale.ROOT)).toArray(String[]::new);
  }

  // ---- the rewrite -----------------------------------------------------------------------------

  private LogicalPlan rewrite(LogicalPlan plan, Map<String, String[]> catalogs, Set<String> ctes, int depth) {
    if (depth > 32) {
      throw new CatalogException("INVALID_PARAMETER_VALUE", "Views nested deeper than 32 levels.", null);
    }
    return plan.transformUpWithSubqueries(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return p instanceof UnresolvedRelation r && !QueryNames.isWriteTarget(r);
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        UnresolvedRelation r = (UnresolvedRelation) p;
        String[] name = qualify(names(r), catalogs, ctes);
        if (name == null) {
          return r;
        }
        String[] conf = catalogs.get(name[0]);
        String scope = Answers.scope(name[0], conf[0], conf[1]);
        JsonNode item = Answers.lookup(scope, String.join(".", name));
        JsonNode table = item == null ? null : item.get("table");
        if (table == null) {
          return r;
        }
        if (isView(table)) {
          return new SubqueryAlias(alias(name), expandView(table, name, catalogs, depth));
        }
        if (isGoverned(table)) {
          return new SubqueryAlias(alias(name), governed(table, name, scope));
        }
        return r;
      }
    });
  }

  private static AliasIdentifier alias(String[] name) {
    return new AliasIdentifier(name[2], CollectionConverters.asScala(List.of(name[0], name[1])).toSeq());
  }

  static boolean isView(JsonNode table) {
    String type = table.path("table_type").asText("");
    return type.endsWith("VIEW") || (table.hasNonNull("view_definition") && !table.hasNonNull("storage_location"));
  }

  static boolean isGoverned(JsonNode table) {
    if (table.hasNonNull("row_filter")) {
      return true;
    }
    for (JsonNode c : table.path("columns")) {
      if (c.hasNonNull("mask")) {
        return true;
      }
    }
    return false;
  }

  /** A view's SQL as a plan: its one- and two-part names qualified with its catalog and schema, then rewritten. */
  private LogicalPlan expandView(JsonNode view, String[] name, Map<String, String[]> catalogs, int depth) {
    LogicalPlan body = parse(view.path("view_definition").asText(), name);
    Set<String> viewCtes = QueryNames.cteNames(body);
    LogicalPlan qualified = body.transformUpWithSubqueries(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return p instanceof UnresolvedRelation;
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        UnresolvedRelation r = (UnresolvedRelation) p;
        List<String> parts = names(r);
        List<String> full = switch (parts.size()) {
          case 1 -> viewCtes.contains(parts.get(0).toLowerCase(Locale.ROOT)) ? parts
              : List.of(name[0], name[1], parts.get(0));
          case 2 -> List.of(name[0], parts.get(0), parts.get(1));
          default -> parts;
        };
        return r.copy(CollectionConverters.asScala(full).toSeq(), r.options(), r.isStreaming());
      }
    });
    return rewrite(qualified, catalogs, viewCtes, depth + 1);
  }

  /**
   * A governed table as the plan reads it: SELECT its columns, each masked one as its mask
   * function applied to it (and its using columns), FROM the marked load WHERE its row filter
   * function holds on its input columns. The functions' SQL bodies are inlined, their parameters
   * replaced by the table's raw columns; the filter sees raw values.
   */
  private LogicalPlan governed(JsonNode table, String[] name, String scope) {
    Map<String, Expression> holes = new HashMap<>();
    List<String> select = new ArrayList<>();
    for (JsonNode c : table.path("columns")) {
      String col = c.path("name").asText();
      JsonNode mask = c.get("mask");
      if (mask == null || mask.isNull()) {
        select.add(quote(col));
        continue;
      }
      String hole = "__shardcat_mask_" + holes.size();
      List<String> args = new ArrayList<>(List.of(col));
      mask.path("using_column_names").forEach(u -> args.add(u.asText()));
      holes.put(hole, inline(scope, mask.path("function_name").asText(), args));
      select.add(quote(hole) + " AS " + quote(col));
    }
    StringBuilder sql = new StringBuilder("SELECT ").append(String.join(", ", select)).append(" FROM ")
        .append(quote(name[0])).append('.').append(quote(name[1])).append('.').append(quote(Governed.MARK))
        .append('.').append(quote(name[2]));
    JsonNode filter = table.get("row_filter");
    if (filter != null && !filter.isNull()) {
      List<String> args = new ArrayList<>();
      filter.path("input_column_names").forEach(u -> args.add(u.asText()));
      holes.put("__shardcat_filter", inline(scope, filter.path("function_name").asText(), args));
      sql.append(" WHERE ").append(quote("__shardcat_filter"));
    }
    return parse(sql.toString(), name).transformAllExpressions(substitution(holes));
  }

  /** A catalog SQL function's body with its parameters replaced by these columns. */
  private Expression inline(String scope, String function, List<String> columns) {
    JsonNode item = Answers.lookup(scope, function);
    JsonNode f = item == null ? null : item.get("function");
    if (f == null || !"SQL".equalsIgnoreCase(f.path("routine_body").asText())) {
      throw new CatalogException("INVALID_PARAMETER_VALUE",
          "Function '" + function + "' is not a SQL function the resolve answer carries; it cannot be applied.", function);
    }
    List<JsonNode> params = new ArrayList<>();
    f.path("input_params").path("parameters").forEach(params::add);
    params.sort((a, b) -> Integer.compare(a.path("position").asInt(), b.path("position").asInt()));
    Map<String, Expression> byParam = new HashMap<>();
    for (int i = 0; i < params.size() && i < columns.size(); i++) {
      byParam.put(params.get(i).path("name").asText(),
          UnresolvedAttribute.quoted(columns.get(i)));
    }
    try {
      return parser.parseExpression(f.path("routine_definition").asText()).transformUp(substitution(byParam));
    } catch (org.apache.spark.sql.catalyst.parser.ParseException e) {
      throw new CatalogException("INVALID_PARAMETER_VALUE", "Function '" + function + "' does not parse: "
          + e.getMessage(), function);
    }
  }

  /** Replaces one-part attribute references named in `by` (case-insensitively). */
  private static AbstractPartialFunction<Expression, Expression> substitution(Map<String, Expression> by) {
    Map<String, Expression> lower = new HashMap<>();
    by.forEach((k, v) -> lower.put(k.toLowerCase(Locale.ROOT), v));
    return new AbstractPartialFunction<>() {
      @Override
      public boolean isDefinedAt(Expression e) {
        return e instanceof UnresolvedAttribute a && a.nameParts().size() == 1
            && lower.containsKey(a.nameParts().head().toLowerCase(Locale.ROOT));
      }

      @Override
      public Expression apply(Expression e) {
        return lower.get(((UnresolvedAttribute) e).nameParts().head().toLowerCase(Locale.ROOT));
      }
    };
  }

  private LogicalPlan parse(String sql, String[] name) {
    try {
      return parser.parsePlan(sql);
    } catch (org.apache.spark.sql.catalyst.parser.ParseException e) {
      throw new CatalogException("INVALID_PARAMETER_VALUE", "The SQL of '" + String.join(".", name)
          + "' does not parse: " + e.getMessage(), String.join(".", name));
    }
  }

  private static String quote(String part) {
    return "`" + part.replace("`", "``") + "`";
  }

  static String[] split(String fullName) {
    return Arrays.stream(fullName.split("\\.")).toArray(String[]::new);
  }
}
