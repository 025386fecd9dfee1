package shardcat.spark;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The resolve answers of the queries this thread is planning: each catalog table or view by its
 * full name, with its decision, asset and credentials, and each catalog function a row filter or
 * mask calls. Spark parses and analyses a query on the same driver thread, so the parser fills
 * this and the catalog's table loads read it. An entry is served for {@link #TTL_MS} only: a
 * query parsed later resolves again, so grants and credentials are never older than that.
 */
final class Answers {
  static final long TTL_MS = 60_000;

  private record Entry(JsonNode item, long at) {}

  private static final ThreadLocal<Map<String, Entry>> CURRENT = ThreadLocal.withInitial(HashMap::new);

  private Answers() {}

  /** Whose answers: a Spark catalog's name with its server and token (sessions may name catalogs alike). */
  static String scope(String catalog, String uri, String token) {
    return catalog.toLowerCase(Locale.ROOT) + "\u0000" + uri + "\u0000" + token;
  }

  private static String key(String scope, String fullName) {
    return scope + "\u0000" + fullName.toLowerCase(Locale.ROOT);
  }

  /**
   * Takes one resolve answer in: a refusal anywhere (an item's error, a denied item, a denied or
   * failed dependency) fails the whole query with the catalog's reason, before anything runs.
   */
  static void record(String scope, JsonNode answer) {
    long now = System.currentTimeMillis();
    Map<String, Entry> current = CURRENT.get();
    current.values().removeIf(e -> now - e.at > TTL_MS);
    for (JsonNode item : answer.path("items")) {
      String name = item.path("name").asText();
      refuseIfDenied(item, name, null);
      current.put(key(scope, name), new Entry(item, now));
      for (JsonNode dep : item.path("dependencies")) {
        refuseIfDenied(dep, dep.path("name").asText(), name);
        current.put(key(scope, dep.path("name").asText()), new Entry(dep, now));
      }
    }
  }

  /** The resolved item (or dependency) of this name, if this thread resolved it within the TTL. */
  static JsonNode lookup(String scope, String fullName) {
    Entry e = CURRENT.get().get(key(scope, fullName));
    return e == null || System.currentTimeMillis() - e.at > TTL_MS ? null : e.item;
  }

  static void refuseIfDenied(JsonNode item, String name, String neededBy) {
    String suffix = neededBy == null ? "" : " (needed by " + neededBy + ")";
    JsonNode error = item.get("error");
    if (error != null) {
      throw new CatalogException(error.path("error_code").asText(), error.path("message").asText() + suffix, name);
    }
    JsonNode authz = item.path("authorization");
    if (!authz.path("allowed").asBoolean(false)) {
      throw new CatalogException("PERMISSION_DENIED", authz.path("reason").asText("not allowed") + suffix, name);
    }
  }
}
