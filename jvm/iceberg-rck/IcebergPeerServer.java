// The Iceberg project's own REST catalog server (the servlet and adapter its compatibility kit
// runs against), over a JDBC catalog on a sqlite file, listening on loopback only: the peer
// benchmarks/bench_iceberg_peer.py measures shardcat beside. Run with Java's source launcher:
//   java -cp <jvm/iceberg-rck class path> IcebergPeerServer.java PORT WAREHOUSE_DIR SQLITE_FILE
// (The kit's own RESTCatalogServer listens on every interface; this binds 127.0.0.1.)

import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class IcebergPeerServer {
  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    Map<String, String> properties = Map.of(
        CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName(),
        CatalogProperties.URI, "jdbc:sqlite:" + args[2],
        CatalogProperties.WAREHOUSE_LOCATION, args[1],
        "jdbc.schema-version", "V1");
    Catalog catalog = CatalogUtil.buildIcebergCatalog("peer", properties, new Configuration());

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    System.out.println("iceberg peer listening on http://127.0.0.1:" + connector.getLocalPort() + "/");
    server.join();
  }
}
