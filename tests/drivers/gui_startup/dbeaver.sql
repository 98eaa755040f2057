-- DBeaver PostgreSQL plugin (plugins/org.jkiss.dbeaver.ext.postgresql, paths
-- below are relative to its src/org/jkiss/dbeaver/ext/postgresql/): the SQL it
-- runs when it connects and when the navigator browses the "public" schema,
-- opens gui_orders (properties, DDL, data) and the gui_big view.
-- Statements are separated by a line holding only ";".
-- Bind parameters that DBeaver fills with object ids it read earlier are
-- written as {{dbname}}, {{public_oid}}, {{gui_orders_oid}}, {{gui_big_oid}};
-- the test replaces them with the values the server reports.

-- plugins/org.jkiss.dbeaver.model.jdbc/.../JDBCExecutionContext.java (pgJDBC Connection.getTransactionIsolation())
SHOW TRANSACTION ISOLATION LEVEL
;
-- plugins/org.jkiss.dbeaver.model.jdbc/.../JDBCSQLDialect.java (loadDriverKeywords: pgJDBC DatabaseMetaData.getSQLKeywords())
select string_agg(word, ',') from pg_catalog.pg_get_keywords() where word <> ALL ('{a,abs,absolute,action,ada,add,admin,after,all,allocate,alter,always,and,any,are,array,as,asc,asensitive,assertion,assignment,asymmetric,at,atomic,attribute,attributes,authorization,avg,before,begin,bernoulli,between,bigint,binary,blob,boolean,both,breadth,by,c,call,called,cardinality,cascade,cascaded,case,cast,catalog,catalog_name,ceil,ceiling,chain,char,char_length,character,character_length,character_set_catalog,character_set_name,character_set_schema,characteristics,characters,check,checked,class_origin,clob,close,coalesce,cobol,code_units,collate,collation,collation_catalog,collation_name,collation_schema,collect,column,column_name,command_function,command_function_code,commit,committed,condition,condition_number,connect,connection_name,constraint,constraint_catalog,constraint_name,constraint_schema,constraints,constructors,contains,continue,convert,corr,corresponding,count,covar_pop,covar_samp,create,cross,cube,cume_dist,current,current_collation,current_date,current_default_transform_group,current_path,current_role,current_time,current_timestamp,current_transform_group_for_type,current_user,cursor,cursor_name,cycle,data,date,datetime_interval_code,datetime_interval_precision,day,deallocate,dec,decimal,declare,default,defaults,deferrable,deferred,defined,definer,degree,delete,dense_rank,depth,deref,derived,desc,describe,descriptor,deterministic,diagnostics,disconnect,dispatch,distinct,domain,double,drop,dynamic,dynamic_function,dynamic_function_code,each,element,else,end,end-exec,equals,escape,every,except,exception,exclude,excluding,exec,execute,exists,exp,external,extract,false,fetch,filter,final,first,float,floor,following,for,foreign,fortran,found,free,from,full,function,fusion,g,general,get,global,go,goto,grant,granted,group,grouping,having,hierarchy,hold,hour,identity,immediate,implementation,in,including,increment,indicator,initially,inner,inout,input,insensitive,insert,instance,instantiable,int,integer,intersect,intersection,interval,into,invoker,is,isolation,join,k,key,key_member,key_type,language,large,last,lateral,leading,left,length,level,like,ln,local,localtime,localtimestamp,locator,lower,m,map,match,matched,max,maxvalue,member,merge,message_length,message_octet_length,message_text,method,min,minute,minvalue,mod,modifies,module,month,more,multiset,mumps,name,names,national,natural,nchar,nclob,nesting,new,next,no,none,normalize,normalized,not,"null",nullable,nullif,nulls,number,numeric,object,octet_length,octets,of,old,on,only,open,option,options,or,order,ordering,ordinality,others,out,outer,output,over,overlaps,overlay,overriding,pad,parameter,parameter_mode,parameter_name,parameter_ordinal_position,parameter_specific_catalog,parameter_specific_name,parameter_specific_schema,partial,partition,pascal,path,percent_rank,percentile_cont,percentile_disc,placing,pli,position,power,preceding,precision,prepare,preserve,primary,prior,privileges,procedure,public,range,rank,read,reads,real,recursive,ref,references,referencing,regr_avgx,regr_avgy,regr_count,regr_intercept,regr_r2,regr_slope,regr_sxx,regr_sxy,regr_syy,relative,release,repeatable,restart,result,return,returned_cardinality,returned_length,returned_octet_length,returned_sqlstate,returns,revoke,right,role,rollback,rollup,routine,routine_catalog,routine_name,routine_schema,row,row_count,row_number,rows,savepoint,scale,schema,schema_name,scope_catalog,scope_name,scope_schema,scroll,search,second,section,security,select,self,sensitive,sequence,serializable,server_name,session,session_user,set,sets,similar,simple,size,smallint,some,source,space,specific,specific_name,specifictype,sql,sqlexception,sqlstate,sqlwarning,sqrt,start,state,statement,static,stddev_pop,stddev_samp,structure,style,subclass_origin,submultiset,substring,sum,symmetric,system,system_user,table,table_name,tablesample,temporary,then,ties,time,timestamp,timezone_hour,timezone_minute,to,top_level_count,trailing,transaction,transaction_active,transactions_committed,transactions_rolled_back,transform,transforms,translate,translation,treat,trigger,trigger_catalog,trigger_name,trigger_schema,trim,true,type,uescape,unbounded,uncommitted,under,union,unique,unknown,unnamed,unnest,update,upper,usage,user,user_defined_type_catalog,user_defined_type_code,user_defined_type_name,user_defined_type_schema,using,value,values,var_pop,var_samp,varchar,varying,view,when,whenever,where,width_bucket,window,with,within,without,work,write,year,zone}'::text[])
;
-- model/PostgreDataSource.java (initialize: "Read server information")
SELECT version()
;
-- model/PostgreDataSource.java (initialize: PostgreUtils.isMetaObjectExists(session, "pg_enum", "*"))
SELECT * FROM pg_catalog.pg_enum WHERE 1<>1 LIMIT 1
;
-- model/PostgreDataSource.java (initialize: PostgreUtils.isMetaObjectExists(session, "pg_class", "reltype"))
SELECT reltype FROM pg_catalog.pg_class WHERE 1<>1 LIMIT 1
;
-- model/PostgreDataSource.java (SettingCache lookup: preload standard_conforming_strings)
select * from pg_catalog.pg_settings where name='standard_conforming_strings'
;
-- model/PostgreDataSource.java (prepareReadDatabaseListStatement, "Show all databases")
SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE 1 = 1 AND datallowconn AND NOT datistemplate OR db.datname ='{{dbname}}'
ORDER BY db.datname
;
-- model/PostgreDatabase.java (readDatabaseInfo)
SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname='{{dbname}}'
;
-- model/PostgreExecutionContext.java (refreshDefaults)
SELECT current_schema(),session_user
;
-- model/PostgreExecutionContext.java (refreshDefaults)
SHOW search_path
;
-- model/PostgreDatabase.java (SchemaCache)
SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass
 ORDER BY nspname
;
-- model/PostgreDatabase.java (cacheDataTypes, with PostgreDataTypeCache.getBaseTypeNameClause)
SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, d.description
FROM pg_catalog.pg_type t
LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem 
LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid
LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid
WHERE t.typname IS NOT NULL
AND (c.relkind IS NULL OR c.relkind = 'c') AND (et.typcategory IS NULL OR et.typcategory <> 'C')
;
-- model/PostgreDatabase.java (EnumValueCache)
SELECT * FROM pg_catalog.pg_enum
;
-- model/PostgreDatabase.java (RoleCache)
SELECT a.oid,a.*,pd.description FROM pg_catalog.pg_roles a 
left join pg_catalog.pg_shdescription pd on a.oid = pd.objoid
ORDER BY a.rolname
;
-- model/PostgreDatabase.java (ExtensionCache)
SELECT 
 e.oid,
 cfg.tbls,
  n.nspname as schema_name,
 e.* 
FROM 
 pg_catalog.pg_extension e 
 join pg_namespace n on n.oid =e.extnamespace
 left join  (
         select
            ARRAY_AGG(ns.nspname || '.' ||  cls.relname) tbls, oid_ext
          from
            (
            select
                unnest(e1.extconfig) oid , e1.oid oid_ext
            from
                pg_catalog.pg_extension e1 ) c 
                join    pg_class cls on cls.oid = c.oid 
                join pg_namespace ns on ns.oid = cls.relnamespace
            group by oid_ext        
         ) cfg on cfg.oid_ext = e.oid
ORDER BY e.oid
;
-- model/PostgreDataSource.java (collectObjectStatistics: database sizes)
SELECT db.datname,pg_database_size(db.oid) FROM pg_catalog.pg_database db 
;
-- model/PostgreExecutionContext.java (setSearchPath: making "public" the default schema)
SET search_path = public,"$user"
;
-- model/PostgreSchema.java (TableCache.prepareLookupStatement: tables, views, matviews, sequences of a schema)
SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr,  pg_catalog.pg_get_partkeydef(c.oid) as partition_key 
FROM pg_catalog.pg_class c
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_class'::regclass
WHERE c.relnamespace={{public_oid}} AND c.relkind not in ('i','I','c')
;
-- model/PostgreSchema.java (cacheTableInheritance)
SELECT i.inhrelid relid, pc.relnamespace parent_ns, pc.oid parent_oid, i.inhseqno
FROM pg_catalog.pg_inherits i, pg_class rc, pg_class pc
WHERE rc.oid=i.inhrelid AND rc.relnamespace={{public_oid}} AND pc.oid=i.inhparent
;
-- model/PostgreSchema.java (TableCache.prepareChildrenStatement: columns of every table in the schema)
SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description,dep.objid
FROM pg_catalog.pg_attribute a
INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)
LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum)
LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)
LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and dep.refobjsubid = a.attnum and dep.classid = dep.refclassid
WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.relnamespace={{public_oid}}
ORDER BY a.attnum
;
-- model/PostgreSchema.java (TableCache.prepareChildrenStatement: columns of one table)
SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description,dep.objid
FROM pg_catalog.pg_attribute a
INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)
LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum)
LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)
LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and dep.refobjsubid = a.attnum and dep.classid = dep.refclassid
WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.oid={{gui_orders_oid}}
ORDER BY a.attnum
;
-- model/PostgreSchema.java (ConstraintCache: constraints of one table)
SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, case when c.contype='c' then "substring"(pg_get_constraintdef(c.oid), 7) else null end consrc_copy
FROM pg_catalog.pg_constraint c
INNER JOIN pg_catalog.pg_class t ON t.oid=c.conrelid
LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_constraint'::regclass
WHERE c.conrelid={{gui_orders_oid}}
ORDER BY c.oid
;
-- model/PostgreSchema.java (ConstraintCache: constraints of the whole schema)
SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, case when c.contype='c' then "substring"(pg_get_constraintdef(c.oid), 7) else null end consrc_copy
FROM pg_catalog.pg_constraint c
INNER JOIN pg_catalog.pg_class t ON t.oid=c.conrelid
LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_constraint'::regclass
WHERE t.relnamespace={{public_oid}}
ORDER BY c.oid
;
-- model/PostgreSchema.java (IndexCache: indexes of one table)
SELECT i.*,i.indkey as keys,c.relname,c.relnamespace,c.relam,c.reltablespace,tc.relname as tabrelname,dsc.description,pg_catalog.pg_get_expr(i.indpred, i.indrelid) as pred_expr,pg_catalog.pg_get_expr(i.indexprs, i.indrelid, true) as expr,pg_catalog.pg_relation_size(i.indexrelid) as index_rel_size,pg_catalog.pg_stat_get_numscans(i.indexrelid) as index_num_scans
FROM pg_catalog.pg_index i
INNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid
INNER JOIN pg_catalog.pg_class tc ON tc.oid=i.indrelid
LEFT OUTER JOIN pg_catalog.pg_description dsc ON i.indexrelid=dsc.objoid
WHERE  i.indrelid={{gui_orders_oid}} ORDER BY c.relname
;
-- model/PostgreSchema.java (ProceduresCache)
SELECT p.oid as poid,p.*,pg_catalog.pg_get_expr(p.proargdefaults, 0) as arg_defaults,d.description
FROM pg_catalog.pg_proc p
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=p.oid and d.classoid='pg_proc'::regclass  AND d.objsubid = 0
WHERE p.pronamespace={{public_oid}}
ORDER BY p.proname
;
-- model/PostgreSchema.java (collectObjectStatistics: "Read relation statistics")
select c.oid,pg_catalog.pg_total_relation_size(c.oid) as total_rel_size,pg_catalog.pg_relation_size(c.oid) as rel_size
FROM pg_class c
WHERE c.relnamespace={{public_oid}}
;
-- model/PostgreTableReal.java (readTableStatistics)
select pg_catalog.pg_total_relation_size({{gui_orders_oid}}) as total_rel_size,pg_catalog.pg_relation_size({{gui_orders_oid}}) as rel_size
;
-- model/PostgreTableReal.java (TriggerCache)
SELECT x.oid,x.*,p.pronamespace as func_schema_id,d.description
FROM pg_catalog.pg_trigger x
LEFT OUTER JOIN pg_catalog.pg_proc p ON p.oid=x.tgfoid 
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=x.oid AND d.objsubid=0 
WHERE x.tgrelid = {{gui_orders_oid}} AND NOT x.tgisinternal
;
-- model/PostgreTable.java (getReferences: schemas holding foreign keys to this table)
SELECT DISTINCT connamespace FROM pg_catalog.pg_constraint WHERE confrelid={{gui_orders_oid}}
;
-- model/PostgreSequence.java (loadAdditionalInfo, server >= 10: the bigserial's sequence)
SELECT * from pg_catalog.pg_sequences WHERE schemaname='public' AND sequencename='gui_orders_id_seq'
;
-- PostgreUtils.java (getObjectComment)
select description from pg_catalog.pg_description
join pg_catalog.pg_class on pg_description.objoid = pg_class.oid
join pg_catalog.pg_namespace on pg_class.relnamespace = pg_namespace.oid
where pg_class.relname = 'gui_orders' and pg_namespace.nspname='public'
;
-- model/PostgreViewBase.java (view DDL tab)
SELECT pg_get_viewdef({{gui_big_oid}}, true)
;
-- plugins/org.jkiss.dbeaver.model/.../QueryTransformerLimit.java (Data tab of gui_orders, PostgreDataSource.createQueryTransformer)
SELECT * FROM public.gui_orders
LIMIT 200
;
-- plugins/org.jkiss.dbeaver.model.jdbc/.../JDBCTable.java (row count in the Data tab / table properties)
SELECT COUNT(*) FROM public.gui_orders
