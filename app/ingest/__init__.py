"""Input validation shared by HTTP and streams: decoded JSON or stream entries -> arrays, or an
error naming the offending value (see docs/service.md, "Bad input changes nothing")."""
