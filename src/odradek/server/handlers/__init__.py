"""API handlers, one module per API family; registered in odradek.server.apis."""
