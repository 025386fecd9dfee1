package shardcat.spark;

/** What the catalog refused, as Spark shows it: the catalog's error code, its message, the asset at fault. */
public final class CatalogException extends RuntimeException {
  public final String code;
  public final String name;

  public CatalogException(String code, String message, String name) {
    super(code + ": " + message + (name == null ? "" : " [" + name + "]"));
    this.code = code;
    this.name = name;
  }
}
