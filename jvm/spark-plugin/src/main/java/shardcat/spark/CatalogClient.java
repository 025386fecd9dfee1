package shardcat.spark;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** The catalog's REST API as the plugin uses it: batched resolve, and the few reads Spark's catalog calls need. */
final class CatalogClient {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final String PREFIX = "/api/2.1/unity-catalog";
  private static final Map<String, CatalogClient> CLIENTS = new ConcurrentHashMap<>();

  private final String base;
  private final String token;
  private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)   // no h2c upgrade
      .connectTimeout(Duration.ofSeconds(10)).build();

  private CatalogClient(String uri, String token) {
    this.base = uri.replaceAll("/+$", "");
    this.token = token;
  }

  /** One client (one connection pool) per catalog server and token. */
  static CatalogClient of(String uri, String token) {
    return CLIENTS.computeIfAbsent(uri + "\n" + token, k -> new CatalogClient(uri, token));
  }

  /** One POST /resolve for these names, views and functions expanded, credentials vended. */
  JsonNode resolve(List<String> names) {
    return resolve(names, "READ");
  }

  JsonNode resolve(List<String> names, String operation) {
    ObjectNode body = JSON.createObjectNode();
    ArrayNode items = body.putArray("items");
    for (String name : names) {
      items.addObject().put("name", name).put("operation", operation);
    }
    return send("POST", "/resolve", body);
  }

  JsonNode getTable(String fullName) {
    return send("GET", "/tables/" + enc(fullName), null);
  }

  JsonNode tableCredentials(String tableId, String operation) {
    ObjectNode body = JSON.createObjectNode().put("table_id", tableId).put("operation", operation);
    return send("POST", "/temporary-table-credentials", body);
  }

  JsonNode list(String what, String query) {
    return send("GET", "/" + what + "?" + query, null);
  }

  static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  private JsonNode send(String method, String path, JsonNode body) {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(base + PREFIX + path))
        .timeout(Duration.ofSeconds(60))
        .header("Authorization", "Bearer " + token)
        .header("Content-Type", "application/json");
    try {
      request.method(method, body == null ? HttpRequest.BodyPublishers.noBody()
          : HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)));
      HttpResponse<byte[]> answer = http.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
      JsonNode json = answer.body().length == 0 ? JSON.createObjectNode() : JSON.readTree(answer.body());
      if (answer.statusCode() >= 400) {
        throw new CatalogException(json.path("error_code").asText("HTTP_" + answer.statusCode()),
            json.path("message").asText(""), null);
      }
      return json;
    } catch (IOException e) {
      throw new CatalogException("UNAVAILABLE", method + " " + path + ": " + e, null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CatalogException("UNAVAILABLE", "interrupted", null);
    }
  }
}
