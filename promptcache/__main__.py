from promptcache.cli import main

main()
