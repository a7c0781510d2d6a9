# The zipapp's entry point: python3 ini.pyz serves ini::Option.
from ini_option import main

main()
