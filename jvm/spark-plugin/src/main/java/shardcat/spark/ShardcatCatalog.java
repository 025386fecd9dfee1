package shardcat.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.DelegatingCatalogExtension;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.TableWritePrivilege;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A shardcat catalog in Spark ({@code spark.sql.catalog.main=shardcat.spark.ShardcatCatalog},
 * options {@code uri}, {@code token}, and {@code batchResolve=false} to turn the parser's batching
 * off). Table loads are answered from the query's resolve answer ({@link Answers}) when the parser
 * resolved it; a load the parser did not see (spark.table, a write target) resolves that one
 * table (READ, or WRITE for a write). With {@code batchResolve=false} every load makes the Unity
 * Catalog connector's two calls instead (GET the table, then its temporary credentials): the
 * benchmark's baseline. Delta's catalog (when on the class path) wraps the loads, so Delta tables
 * come back as Delta tables; others as Spark's file sources. Namespaces and table lists come from
 * the REST API. Creating, altering and dropping are the connector's or the REST API's, not this
 * catalog's.
 */
public class ShardcatCatalog implements TableCatalog, SupportsNamespaces {
  private String name;
  private CatalogClient client;
  private boolean batched;
  private TableCatalog tables;
  private String scope;

  /** catalog name (lower case) -> {uri, token, batchResolve} for every catalog of this class in the session. */
  static Map<String, String[]> configured(SparkSession session) {
    Map<String, String[]> out = new HashMap<>();
    Map<String, String> conf = scala.jdk.javaapi.CollectionConverters.asJava(session.conf().getAll());
    String prefix = "spark.sql.catalog.";
    for (Map.Entry<String, String> e : conf.entrySet()) {
      String key = e.getKey();
      if (key.startsWith(prefix) && key.indexOf('.', prefix.length()) < 0
          && ShardcatCatalog.class.getName().equals(e.getValue())) {
        String n = key.substring(prefix.length());
        out.put(n.toLowerCase(Locale.ROOT), new String[] {
            conf.get(key + ".uri"), conf.get(key + ".token"), conf.getOrDefault(key + ".batchResolve", "true")});
      }
    }
    return out;
  }

  @Override
  public void initialize(String name, CaseInsensitiveStringMap options) {
    this.name = name;
    this.client = CatalogClient.of(options.get("uri"), options.get("token"));
    this.batched = options.getBoolean("batchResolve", true);
    this.scope = Answers.scope(name, options.get("uri"), options.get("token"));
    Loads loads = new Loads();
    TableCatalog outer = loads;
    try {
      Object delta = Class.forName("org.apache.spark.sql.delta.catalog.DeltaCatalog").getDeclaredConstructor()
          .newInstance();
      ((DelegatingCatalogExtension) delta).setDelegateCatalog(loads);
      outer = (TableCatalog) delta;
    } catch (ReflectiveOperationException e) {
      // no Delta on the class path: Spark's own data sources read every table
    }
    outer.initialize(name, options);
    this.tables = outer;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public Table loadTable(Identifier ident) throws NoSuchTableException {
    return tables.loadTable(ident);
  }

  @Override
  public Table loadTable(Identifier ident, Set<TableWritePrivilege> writePrivileges) throws NoSuchTableException {
    return tables.loadTable(ident, writePrivileges);
  }

  /** What Delta's catalog wraps: the catalog's answer for one table, as a V1Table. */
  private final class Loads implements TableCatalog, SupportsNamespaces {
    @Override
    public void initialize(String n, CaseInsensitiveStringMap options) {}

    @Override
    public String name() {
      return name;
    }

    @Override
    public Table loadTable(Identifier ident) throws NoSuchTableException {
      return load(ident, "READ");
    }

    @Override
    public Table loadTable(Identifier ident, Set<TableWritePrivilege> writePrivileges) throws NoSuchTableException {
      return load(ident, "WRITE");
    }

    private Table load(Identifier ident, String operation) throws NoSuchTableException {
      Identifier unmarked = Governed.unmarked(ident);
      boolean policiesInPlan = unmarked != null;
      Identifier id = policiesInPlan ? unmarked : ident;
      if (id.namespace().length != 1) {
        throw new NoSuchTableException(ident);
      }
      String full = String.join(".", name, id.namespace()[0], id.name()).toLowerCase(Locale.ROOT);
      JsonNode item = batched && "READ".equals(operation) ? Answers.lookup(scope, full) : null;
      if (item == null) {
        item = batched || "WRITE".equals(operation) ? resolveOne(full, operation) : connectorStyle(full);
      }
      JsonNode table = item.path("table");
      if (QueryResolver.isView(table)) {
        throw new CatalogException("INVALID_PARAMETER_VALUE", "'" + full + "' is a view: read it in a SQL query "
            + "(spark.sql), where the plugin expands it.", full);
      }
      if (QueryResolver.isGoverned(table) && !policiesInPlan) {
        throw new CatalogException("PERMISSION_DENIED", "'" + full + "' has a row filter or column masks: read it "
            + "in a SQL query (spark.sql), where the plugin applies them.", full);
      }
      JsonNode refused = item.get("temporary_credentials_error");
      if (refused != null && !refused.isNull()) {
        throw new CatalogException(refused.path("error_code").asText(), refused.path("message").asText(), full);
      }
      return V1Tables.of(table, item.get("temporary_credentials"));
    }

    private JsonNode resolveOne(String full, String operation) {
      JsonNode item = client.resolve(List.of(full), operation).path("items").path(0);
      Answers.refuseIfDenied(item, full, null);
      for (JsonNode dep : item.path("dependencies")) {
        Answers.refuseIfDenied(dep, dep.path("name").asText(), full);
      }
      return item;
    }

    /** What the Unity Catalog connector asks per table load: the table, then its credentials. */
    private JsonNode connectorStyle(String full) {
      JsonNode table = client.getTable(full);
      ObjectNode item = CatalogClient.JSON.createObjectNode();
      item.set("table", table);
      if (!QueryResolver.isView(table)) {
        item.set("temporary_credentials", client.tableCredentials(table.path("table_id").asText(), "READ"));
      }
      return item;
    }

    @Override
    public Identifier[] listTables(String[] namespace) {
      return ShardcatCatalog.this.listTables(namespace);
    }

    @Override
    public String[][] listNamespaces() {
      return ShardcatCatalog.this.listNamespaces();
    }

    @Override
    public String[][] listNamespaces(String[] namespace) {
      return ShardcatCatalog.this.listNamespaces(namespace);
    }

    @Override
    public Map<String, String> loadNamespaceMetadata(String[] namespace) {
      return ShardcatCatalog.this.loadNamespaceMetadata(namespace);
    }

    @Override
    public void createNamespace(String[] namespace, Map<String, String> metadata) {
      ShardcatCatalog.this.createNamespace(namespace, metadata);
    }

    @Override
    public void alterNamespace(String[] namespace, NamespaceChange... changes) {
      ShardcatCatalog.this.alterNamespace(namespace, changes);
    }

    @Override
    public boolean dropNamespace(String[] namespace, boolean cascade) {
      return ShardcatCatalog.this.dropNamespace(namespace, cascade);
    }

    @Override
    public Table createTable(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> p) {
      return ShardcatCatalog.this.createTable(ident, columns, partitions, p);
    }

    @Override
    public Table alterTable(Identifier ident, TableChange... changes) {
      return ShardcatCatalog.this.alterTable(ident, changes);
    }

    @Override
    public boolean dropTable(Identifier ident) {
      return ShardcatCatalog.this.dropTable(ident);
    }

    @Override
    public void renameTable(Identifier from, Identifier to) {
      ShardcatCatalog.this.renameTable(from, to);
    }
  }

  // ---- names: the REST API's lists ---------------------------------------------------------------

  @Override
  public Identifier[] listTables(String[] namespace) {
    List<Identifier> out = new ArrayList<>();
    String token = "";
    do {
      JsonNode page = client.list("tables", "catalog_name=" + CatalogClient.enc(name) + "&schema_name="
          + CatalogClient.enc(namespace[0]) + (token.isEmpty() ? "" : "&page_token=" + CatalogClient.enc(token)));
      for (JsonNode t : page.path("tables")) {
        out.add(Identifier.of(namespace, t.path("name").asText()));
      }
      token = page.path("next_page_token").asText("");
    } while (!token.isEmpty());
    return out.toArray(Identifier[]::new);
  }

  @Override
  public String[][] listNamespaces() {
    List<String[]> out = new ArrayList<>();
    for (JsonNode s : client.list("schemas", "catalog_name=" + CatalogClient.enc(name)).path("schemas")) {
      out.add(new String[] {s.path("name").asText()});
    }
    return out.toArray(String[][]::new);
  }

  @Override
  public String[][] listNamespaces(String[] namespace) {
    return new String[0][];
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(String[] namespace) {
    JsonNode schema = client.list("schemas/" + CatalogClient.enc(name + "." + String.join(".", namespace)), "");
    Map<String, String> out = new HashMap<>();
    if (schema.hasNonNull("comment")) {
      out.put("comment", schema.path("comment").asText());
    }
    return out;
  }

  private static UnsupportedOperationException readsOnly() {
    return new UnsupportedOperationException("shardcat's Spark plugin reads and writes existing tables; create, "
        + "alter and drop them through the REST API (or the Unity Catalog connector).");
  }

  @Override
  public void createNamespace(String[] namespace, Map<String, String> metadata) {
    throw readsOnly();
  }

  @Override
  public void alterNamespace(String[] namespace, NamespaceChange... changes) {
    throw readsOnly();
  }

  @Override
  public boolean dropNamespace(String[] namespace, boolean cascade) {
    throw readsOnly();
  }

  @Override
  public Table createTable(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> props) {
    throw readsOnly();
  }

  @Override
  public Table alterTable(Identifier ident, TableChange... changes) {
    throw readsOnly();
  }

  @Override
  public boolean dropTable(Identifier ident) {
    throw readsOnly();
  }

  @Override
  public void renameTable(Identifier from, Identifier to) {
    throw readsOnly();
  }
}
