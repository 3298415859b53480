-- The dashboard's own tables (users, API tokens, jobs, process registry) live in their
-- own database beside the checkpoint database (POSTGRES_DB). Runs once, on an empty volume.
CREATE DATABASE dashboard;
