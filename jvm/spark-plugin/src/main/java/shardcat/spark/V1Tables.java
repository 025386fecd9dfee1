package shardcat.spark;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTableType;
import org.apache.spark.sql.connector.catalog.V1Table;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A catalog table (a resolve item's {@code table} and {@code temporary_credentials}) as the
 * {@link V1Table} Spark's data sources and Delta's catalog read: its location, format, schema,
 * partition columns, and its vended S3 credentials as per-table Hadoop options (Delta hands a
 * table's storage properties to the file system that reads it).
 */
final class V1Tables {
  private V1Tables() {}

  static V1Table of(JsonNode table, JsonNode credentials) {
    TableIdentifier ident = new TableIdentifier(table.path("name").asText(),
        Option.apply(table.path("schema_name").asText()), Option.apply(table.path("catalog_name").asText()));
    CatalogTableType type = "MANAGED".equals(table.path("table_type").asText())
        ? CatalogTableType.MANAGED() : CatalogTableType.EXTERNAL();
    URI location = URI.create(table.path("storage_location").asText());
    Map<String, String> props = new HashMap<>();
    table.path("properties").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
    props.putAll(hadoopOptions(credentials));
    CatalogStorageFormat empty = CatalogStorageFormat.empty();
    CatalogStorageFormat storage = empty.copy(Option.apply(location), empty.inputFormat(), empty.outputFormat(),
        empty.serde(), false, scalaMap(props));
    String provider = table.path("data_source_format").asText("PARQUET").toLowerCase(Locale.ROOT);
    return new V1Table(catalogTable(ident, type, storage, schema(table), provider, partitionColumns(table)));
  }

  /** Spark's StructType from the catalog's columns: each column's type_json (a StructField), else its type_text. */
  static StructType schema(JsonNode table) {
    ObjectNode struct = CatalogClient.JSON.createObjectNode().put("type", "struct");
    ArrayNode fields = struct.putArray("fields");
    for (JsonNode c : table.path("columns")) {
      String typeJson = c.path("type_json").asText("");
      ObjectNode field;
      try {
        field = typeJson.isEmpty() ? null : (ObjectNode) CatalogClient.JSON.readTree(typeJson);
      } catch (Exception e) {
        field = null;
      }
      if (field == null || !field.has("type")) {
        field = CatalogClient.JSON.createObjectNode();
        try {
          field.set("type", CatalogClient.JSON.readTree(DataType.fromDDL(c.path("type_text").asText()).json()));
        } catch (Exception e) {
          throw new CatalogException("INVALID_PARAMETER_VALUE", "Column type " + c.path("type_text"), null);
        }
      }
      field.put("name", c.path("name").asText());
      field.put("nullable", c.path("nullable").asBoolean(true));
      if (!field.has("metadata")) {
        field.putObject("metadata");
      }
      fields.add(field);
    }
    return (StructType) DataType.fromJson(struct.toString());
  }

  private static List<String> partitionColumns(JsonNode table) {
    List<JsonNode> parts = new ArrayList<>();
    for (JsonNode c : table.path("columns")) {
      if (c.hasNonNull("partition_index")) {
        parts.add(c);
      }
    }
    parts.sort((a, b) -> Integer.compare(a.path("partition_index").asInt(), b.path("partition_index").asInt()));
    return parts.stream().map(c -> c.path("name").asText()).toList();
  }

  /** S3A options for vended S3 credentials (none for file://, whose credentials carry no secret). */
  static Map<String, String> hadoopOptions(JsonNode credentials) {
    Map<String, String> out = new HashMap<>();
    JsonNode aws = credentials == null ? null : credentials.get("aws_temp_credentials");
    if (aws == null || aws.isNull()) {
      return out;
    }
    out.put("fs.s3a.access.key", aws.path("access_key_id").asText());
    out.put("fs.s3a.secret.key", aws.path("secret_access_key").asText());
    if (aws.hasNonNull("session_token")) {
      out.put("fs.s3a.session.token", aws.path("session_token").asText());
      out.put("fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider");
    } else {
      out.put("fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider");
    }
    String endpoint = credentials.path("endpoint_url").asText(aws.path("endpoint_url").asText(""));
    if (!endpoint.isEmpty()) {
      out.put("fs.s3a.endpoint", endpoint);
      out.put("fs.s3a.path.style.access", "true");
    }
    String region = credentials.path("region").asText("");
    if (!region.isEmpty()) {
      out.put("fs.s3a.endpoint.region", region);
    }
    out.put("fs.s3a.impl.disable.cache", "true");     // a file system per table's keys, not one shared
    return out;
  }

  private static scala.collection.immutable.Map<String, String> scalaMap(Map<String, String> m) {
    return scala.collection.immutable.Map.from(CollectionConverters.asScala(m));
  }

  /**
   * CatalogTable's constructor with its first six fields given and the rest at their defaults,
   * taken through reflection so that a Spark release adding a field does not break the plugin.
   */
  private static CatalogTable catalogTable(TableIdentifier ident, CatalogTableType type, CatalogStorageFormat storage,
                                           StructType schema, String provider, List<String> partitionColumns) {
    try {
      Constructor<?> ctor = null;
      for (Constructor<?> c : CatalogTable.class.getConstructors()) {
        if (ctor == null || c.getParameterCount() > ctor.getParameterCount()) {
          ctor = c;
        }
      }
      Object companion = Class.forName(CatalogTable.class.getName() + "$").getField("MODULE$").get(null);
      Object[] args = new Object[ctor.getParameterCount()];
      args[0] = ident;
      args[1] = type;
      args[2] = storage;
      args[3] = schema;
      args[4] = Option.apply(provider);
      args[5] = CollectionConverters.asScala(partitionColumns).toSeq();
      for (int i = 6; i < args.length; i++) {
        Method d = companion.getClass().getMethod("$lessinit$greater$default$" + (i + 1));
        args[i] = d.invoke(companion);
      }
      return (CatalogTable) ctor.newInstance(args);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("This Spark's CatalogTable is not the one the plugin knows", e);
    }
  }
}
