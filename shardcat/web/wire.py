"""What travels on the wire, for servers and clients alike: the API's path prefix, its headers, the
largest body. No imports: the clients (the CLI, Spark's catalog client) read it too."""

PREFIX = "/api/2.1/unity-catalog"
CONTROL_PREFIX = "/api/1.0/unity-control"       # principals and tokens, as the open-source server serves them
SHARING_PREFIX = "/api/2.1/delta-sharing"    # the Delta Sharing protocol server (catalog/protocols/delta_sharing/)
MAX_BODY_BYTES = 4 << 20
VERSION_HEADER = "X-Shardcat-Version"          # the metastore version an answer reflects
MIN_VERSION_HEADER = "X-Shardcat-Min-Version"  # serve at least this version (one the client saw acknowledged)
REQUEST_ID_HEADER = "X-Shardcat-Request-Id"    # the audit row's request id, on every answer
HEAD_HEADER = "X-Shardcat-Head"                # a HEAD the fronts send on as a GET (the Delta API's tableExists)
AS_OF_VERSION_HEADER = "X-Shardcat-As-Of-Version"   # the past version a read was answered at (docs/versions.md)
# A shard answer's own headers that a router passes on to its client, besides the content type and date.
RELAYED_HEADERS = (VERSION_HEADER, REQUEST_ID_HEADER, AS_OF_VERSION_HEADER,
                   # Delta Sharing's: a table's version, the response format, a file's byte range
                   "Delta-Table-Version", "delta-sharing-capabilities", "Content-Range", "Accept-Ranges",
                   "ETag")                     # the Iceberg REST catalog's loadTable (its 304s too)
CLIENT_ADDRESS_HEADER = "X-Shardcat-Client-Address"   # set by the HTTP/1.1 front: the client's IP address
CLIENT_HOST_HEADER = "X-Shardcat-Client-Host"         # set by the HTTP/1.1 front: the Host the client asked for
FORWARDED_FOR_HEADER = "X-Shardcat-Forwarded-For"     # set by a router: "<client address>;<HMAC of it>"
