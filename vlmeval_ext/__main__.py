from vlmeval_ext.cli.main import main

main()
