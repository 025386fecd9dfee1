"""The HTTP kit both apps stand on: the HTTP/1.1 server and client, middlewares, the API's JSON and
paging conventions, and the endpoint registry."""
