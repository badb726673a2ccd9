#!/bin/sh
set -eu
echo "starting backup at $(date -u +%FT%TZ)"   
pg_dump "$DATABASE_URL" | gzip > /backup/db.sql.gz


echo done