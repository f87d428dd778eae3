# shellcheck shell=bash
# Point Airflow at this repository with its home under $LAKEHOUSE_HOME/airflow.
#
#   source scripts/airflow_env.sh      # then: airflow standalone   (or db migrate / dag-processor / scheduler ...)
#
# LAKEHOUSE_HOME defaults to ./.lakehouse (as for the `lakehouse` CLI) and is made absolute, so every Airflow
# process, whatever its working directory, uses the same deployment. Variables you already exported win
# (AIRFLOW_HOME, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN, ...). The values come from
# plugins/lakehouse_airflow/env.py, the same code the tests use.
_lakehouse_repo="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
_lakehouse_python="${PYTHON:-$_lakehouse_repo/.venv/bin/python}"
[ -x "$_lakehouse_python" ] || _lakehouse_python="$(command -v python3)"
eval "$("$_lakehouse_python" "$_lakehouse_repo/plugins/lakehouse_airflow/env.py")"
mkdir -p "$AIRFLOW_HOME"
unset _lakehouse_repo _lakehouse_python
